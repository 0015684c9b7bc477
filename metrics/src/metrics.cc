// placeholder translation unit; real code arrives with its issue
namespace rdmad::metrics {}
