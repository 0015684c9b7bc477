#!/usr/bin/env python3
"""Real kernel verbs devices for the tests: Debian's kernel (which has rdma_rxe) booted in qemu
guests under TCG, each guest seeing this machine's root file system read-only over 9p, so it runs
the project's binaries from the build directory and the host's libraries, tools and providers as
they are. Nothing is installed on the host: the kernel package is fetched with `apt-get download`
into a cache under the build directory.

  rdmad_vm.py prepare --cache DIR
      Fetches and unpacks the kernel, indexes its modules (depmod -b), extracts an uncompressed
      vmlinux (PVH boot: seconds, not tens of seconds, under TCG) and builds a small initramfs
      (busybox, the virtio and 9p modules). Idempotent: a prepared cache is reused.

  rdmad_vm.py run --cache DIR [--guests N] [--rails R] [--mtu BYTES] [--tap NETNS [--host-cmd CMD]] [--timeout S]
                  [--out DIR] SCRIPT [ARGS...]
      Boots N guests (default 1). Guest g has R virtio NICs (rails, default 2), eth<r> with
      10.<r+1>.0.<g+1>/24 and an rxe device rxe<r> on it. Rail r of guest 0 is joined to rail r of
      guest 1 by a qemu UDP socket pair on 127.0.0.1 (with one guest, its rails are joined to each
      other). --mtu sets the rails' netdev MTU (default 1500; rxe's active MTU follows it: 1024 at
      1500, 4096 from 4200 bytes up). --tap NETNS adds one more NIC, eth<R>, 10.200.0.<g+1>/24, joined to a tap device in a
      network namespace this program creates (the host side is 10.200.0.254, tap0 in NETNS), for
      talking to the host. Every guest runs `bash SCRIPT GUEST_INDEX ARGS...` after its set-up
      (tests/vm/guest/boot.sh); the run succeeds when every guest's script exits 0 within the
      deadline. --out DIR is shared read-write with every guest at /mnt (RDMAD_VM_OUT in the script);
      without --out the guests share a fresh temporary directory, removed afterwards, so they can
      always coordinate through files. --host-cmd CMD runs `bash -c CMD` on the host inside NETNS
      beside the guests (the host side of an interop test, started before them so it can listen on
      10.200.0.254), under the same deadline: the run then succeeds only when CMD exits 0 too; CMD
      failing stops the guests, a guest failing stops CMD. A failure prints the guests' console logs
      and CMD's output, a pass the console lines that start with "report: ". qemu processes, CMD's
      process group, the namespace and the temporary directory are removed on any exit. CMD gets the
      share's host path in RDMAD_VM_OUT.
      --sysroot DIR boots DIR instead of the host's root: a Debian root shared read-write in which
      systemd is PID 1 (tests/vm/guest/init), the host's root read-only at /host, the kernel's
      modules at /lib/modules, the share at /mnt. The harness does not run SCRIPT there: a unit in
      DIR does (it finds SCRIPT in rdmad.cmd= on the kernel command line, as boot.sh does) and
      writes RDMAD-VM-EXIT=<code> to the console before it powers off.

Exit codes: 0 pass, 1 fail, 77 skip (qemu or the kernel package cannot be had here; the reason is
printed), 2 usage.
"""
import argparse
import atexit
import lzma
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_MARK = "RDMAD-VM-EXIT="
# A guest's console line starting with this is printed even when the run passes (results, figures).
REPORT_MARK = "report: "
# Modules the initramfs loads before it can mount the host's root: virtio, its network driver and 9p.
EARLY_MODULES = ["virtio_pci", "virtio_net", "9pnet_virtio", "9p"]


def log(msg):
    print(f"rdmad_vm: {msg}", file=sys.stderr, flush=True)


def skip(reason):
    print(f"rdmad_vm: SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


# ---------------------------------------------------------------------------------------------
# prepare


def kernel_package():
    """The exact package linux-image-amd64 depends on (linux-image-6.1.0-NN-amd64)."""
    out = run(["apt-cache", "depends", "linux-image-amd64"]).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") and "linux-image-" in line:
            return line.split()[-1]
    raise RuntimeError("apt-cache depends linux-image-amd64 names no kernel image:\n" + out)


def extract_vmlinux(vmlinuz, vmlinux):
    """The ELF kernel inside a bzImage (xz payload): qemu boots it directly (PVH)."""
    data = open(vmlinuz, "rb").read()
    at = data.find(b"\xfd7zXZ\x00")
    if at < 0:
        raise RuntimeError(f"{vmlinuz}: no xz payload")
    out = lzma.LZMADecompressor().decompress(data[at:])
    if out[:4] != b"\x7fELF":
        raise RuntimeError(f"{vmlinuz}: the payload is not an ELF kernel")
    tmp = vmlinux + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, vmlinux)


def build_initramfs(root, version, path):
    work = tempfile.mkdtemp(prefix="rdmad-initrd-")
    try:
        for d in ("bin", "mods", "host", "proc", "sys", "dev", "out", "newroot"):
            os.makedirs(os.path.join(work, d))
        busybox = shutil.which("busybox")
        if busybox is None:
            raise RuntimeError("busybox is not installed (busybox-static)")
        shutil.copy(busybox, os.path.join(work, "bin", "busybox"))
        # Relative links: `busybox --install -s` would write absolute host paths.
        for applet in ("sh", "mount", "umount", "insmod", "mkdir", "chroot", "cat", "echo", "poweroff", "sed", "sleep",
                       "grep", "tr", "switch_root"):
            os.symlink("busybox", os.path.join(work, "bin", applet))
        order = []
        for m in EARLY_MODULES:
            deps = run(["modprobe", "-d", root, "-S", version, "--show-depends", m]).stdout
            for line in deps.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "insmod" and parts[1] not in order:
                    order.append(parts[1])
        names = []
        for i, ko in enumerate(order):
            name = f"{i:02d}-{os.path.basename(ko)}"
            shutil.copy(ko, os.path.join(work, "mods", name))
            names.append(name)
        with open(os.path.join(work, "mods", "order"), "w") as f:
            f.write("\n".join(names) + "\n")
        shutil.copy(os.path.join(HERE, "guest", "init"), os.path.join(work, "init"))
        os.chmod(os.path.join(work, "init"), 0o755)
        files = run(["find", "."], cwd=work).stdout
        with open(path + ".tmp", "wb") as out:
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=work, input=files.encode(), stdout=out,
                           check=True)
        os.replace(path + ".tmp", path)
        shutil.copy(os.path.join(HERE, "guest", "init"), path + ".init")  # what it was built with
    finally:
        shutil.rmtree(work, ignore_errors=True)


def initramfs_current(path):
    """Whether the initramfs at `path` was built from today's tests/vm/guest/init."""
    try:
        with open(path + ".init", "rb") as a, open(os.path.join(HERE, "guest", "init"), "rb") as b:
            return a.read() == b.read()
    except OSError:
        return False


def prepare(cache):
    """Returns (vmlinux, initramfs, modules root, kernel version); skips where it cannot."""
    for tool in ("qemu-system-x86_64", "apt-get", "dpkg-deb", "depmod", "modprobe", "cpio", "busybox"):
        if shutil.which(tool) is None:
            skip(f"{tool} is not installed (scripts/setup-deps installs the vm test tools)")
    os.makedirs(cache, exist_ok=True)
    stamp = os.path.join(cache, "ready")
    if os.path.exists(stamp):
        version, pkg = open(stamp).read().split()
        root = os.path.join(cache, pkg)
        initramfs = os.path.join(cache, "initramfs.cpio")
        if not initramfs_current(initramfs):
            log("tests/vm/guest/init changed: rebuilding the initramfs")
            build_initramfs(root, version, initramfs)
        return (os.path.join(cache, "vmlinux"), os.path.join(cache, "initramfs.cpio"), root, version)
    try:
        pkg = kernel_package()
    except (subprocess.CalledProcessError, RuntimeError) as e:
        skip(f"no kernel package can be found: {e}")
    version = pkg[len("linux-image-"):]
    root = os.path.join(cache, pkg)
    log(f"preparing {pkg} in {cache}")
    debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
    if not debs:
        try:
            run(["apt-get", "download", pkg], cwd=cache)
        except subprocess.CalledProcessError as e:
            skip(f"apt-get download {pkg} failed:\n{e.stdout}")
        debs = [f for f in os.listdir(cache) if f.startswith(pkg + "_") and f.endswith(".deb")]
    shutil.rmtree(root, ignore_errors=True)
    run(["dpkg-deb", "-x", os.path.join(cache, debs[0]), root])
    run(["depmod", "-b", root, version])
    extract_vmlinux(os.path.join(root, "boot", f"vmlinuz-{version}"), os.path.join(cache, "vmlinux"))
    build_initramfs(root, version, os.path.join(cache, "initramfs.cpio"))
    with open(stamp, "w") as f:
        f.write(f"{version} {pkg}\n")
    return (os.path.join(cache, "vmlinux"), os.path.join(cache, "initramfs.cpio"), root, version)


# ---------------------------------------------------------------------------------------------
# run

_procs = []
_netns = []
_tmpdirs = []


def cleanup():
    for p in _procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for ns in _netns:
        subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for d in _tmpdirs:
        shutil.rmtree(d, ignore_errors=True)
    _procs.clear()
    _netns.clear()
    _tmpdirs.clear()


def guest_code(console):
    """The exit code a guest's script reported on its console (None: none yet)."""
    text = open(console, errors="replace").read() if os.path.exists(console) else ""
    code = None
    for line in text.splitlines():
        if line.startswith(EXIT_MARK):
            code = int(line[len(EXIT_MARK):].strip() or 1)
    return code


def free_udp_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def make_tap_netns(name):
    _netns.append(name)
    subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for cmd in (["ip", "netns", "add", name],
                ["ip", "-n", name, "link", "set", "lo", "up"],
                ["ip", "-n", name, "tuntap", "add", "dev", "tap0", "mode", "tap"],
                ["ip", "-n", name, "addr", "add", "10.200.0.254/24", "dev", "tap0"],
                ["ip", "-n", name, "link", "set", "tap0", "up"]):
        run(cmd)


# Host directories the guests cover with their own tmpfs (tests/vm/guest/init). A path the run needs
# under one of them (a checkout in /tmp or /root) is bound back into the guest from the host's view.
SHADOWED = ("/tmp", "/run", "/root")


def kept_paths(paths):
    """The top-level directories under SHADOWED that hold any of `paths` (comma-free, sorted)."""
    keep = set()
    for p in paths:
        if not p.startswith("/") or not os.path.exists(p):
            continue
        p = os.path.realpath(p)
        for top in SHADOWED:
            if p.startswith(top + "/"):
                keep.add(top + "/" + p[len(top) + 1:].split("/")[0])
    for k in keep:
        if "," in k or any(c.isspace() for c in k):
            raise SystemExit(f"rdmad_vm: a path the guests need may not hold spaces or commas: {k!r}")
    return sorted(keep)


def mac(guest, nic):
    return f"52:54:00:{0x10 + guest:02x}:{nic:02x}:01"


def qemu_argv(args, g, vmlinux, initramfs, rail_ports, script_args, console):
    # -cpu max: every instruction TCG emulates. The default qemu64 model lacks SSE4.2, which the
    # Debian build of DPDK (linked by rdmad and the test programs the guests run) requires at load.
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", str(args.mem), "-smp", "1", "-nographic",
            "-no-reboot",
            "-display", "none", "-monitor", "none", "-serial", f"file:{console}",
            "-kernel", vmlinux, "-initrd", initramfs,
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"]
    if args.out:
        argv += ["-virtfs", f"local,path={os.path.abspath(args.out)},mount_tag=out,security_model=none,multidevs=remap"]
    if args.sysroot:
        argv += ["-virtfs", f"local,path={os.path.abspath(args.sysroot)},mount_tag=sysroot,security_model=none,"
                            "multidevs=remap"]
    for r in range(args.rails):
        mine, other = rail_ports[(g, r)]
        argv += ["-netdev", f"socket,id=r{r},udp=127.0.0.1:{other},localaddr=127.0.0.1:{mine}",
                 "-device", f"virtio-net-pci,netdev=r{r},mac={mac(g, r)},romfile="]
    if args.tap:
        if g > 0:
            raise SystemExit("--tap joins guest 0 only")
        argv += ["-netdev", "tap,id=t0,ifname=tap0,script=no,downscript=no",
                 "-device", f"virtio-net-pci,netdev=t0,mac={mac(g, args.rails)},romfile="]
    # The guest's command line carries what boot.sh needs; the script's words are joined by %20.
    for a in script_args:
        if any(c.isspace() for c in a) or "%" in a:
            raise SystemExit(f"rdmad_vm: a script argument may not hold spaces or %: {a!r}")
    enc = lambda s: s.replace(" ", "%20")
    cmd = " ".join(script_args)
    keep = kept_paths([HERE, args.cache] + script_args)
    append = (f"console=ttyS0 panic=-1 quiet rdmad.guest={g} rdmad.guests={args.guests} rdmad.rails={args.rails} "
              f"rdmad.tap={1 if args.tap else 0} rdmad.out={1 if args.out else 0} rdmad.mtu={args.mtu} "
              f"rdmad.modroot={args.modroot} rdmad.kver={args.kver} rdmad.keep={','.join(keep) or '-'} "
              f"rdmad.boot={os.path.join(HERE, 'guest', 'boot.sh')} rdmad.cmd={enc(cmd)}")
    if args.sysroot:
        # systemd as PID 1 in the --sysroot tree (tests/vm/guest/init): eth<n> names, a quiet console.
        append += " rdmad.sysroot=1 net.ifnames=0 systemd.show_status=0"
    argv += ["-append", append]
    if args.tap:
        argv = ["ip", "netns", "exec", args.tap] + argv
    return argv


def run_guests(args):
    args.cache = os.path.abspath(args.cache)  # the guests resolve the module root from /
    vmlinux, initramfs, root, version = prepare(args.cache)
    args.modroot, args.kver = root, version
    atexit.register(cleanup)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(1))
    if args.tap:
        make_tap_netns(args.tap)
    if not args.out:
        args.out = tempfile.mkdtemp(prefix="rdmad-vm-share-")
        _tmpdirs.append(args.out)
    # Rails: guest 0 rail r <-> guest 1 rail r; a single guest's rails pair with each other.
    rail_ports = {}
    if args.guests == 1:
        ports = free_udp_ports(args.rails)
        for r in range(args.rails):
            rail_ports[(0, r)] = (ports[r], ports[(r + 1) % args.rails] if args.rails > 1 else ports[r])
    else:
        for r in range(args.rails):
            a, b = free_udp_ports(2)
            rail_ports[(0, r)] = (a, b)
            rail_ports[(1, r)] = (b, a)
            for g in range(2, args.guests):  # further guests: rails of their own, unconnected
                c, d = free_udp_ports(2)
                rail_ports[(g, r)] = (c, d)
    logdir = tempfile.mkdtemp(prefix="rdmad-vm-")
    consoles = []
    start = time.monotonic()
    host, host_log = None, None
    if args.host_cmd:
        # Before the guests, so that a listener is up by the time they connect. Its own process
        # group: cleanup() kills everything it started.
        host_log = tempfile.TemporaryFile(dir=logdir)
        host = subprocess.Popen(["ip", "netns", "exec", args.tap, "bash", "-c", args.host_cmd], stdin=subprocess.DEVNULL,
                                stdout=host_log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, RDMAD_VM_OUT=os.path.abspath(args.out)))
        _procs.append(host)
    for g in range(args.guests):
        console = os.path.join(logdir, f"guest{g}.log")
        consoles.append(console)
        argv = qemu_argv(args, g, vmlinux, initramfs, rail_ports, [os.path.abspath(args.script)] + args.script_args,
                         console)
        _procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, start_new_session=True))
    deadline = start + args.timeout
    guests = [p for p in _procs if p is not host]
    while time.monotonic() < deadline:
        guests_done = all(p.poll() is not None for p in guests)
        if host is None and guests_done:
            break
        if host is not None and host.poll() is not None and (host.returncode != 0 or guests_done):
            break  # the host side failed (the guests cannot pass without it), or everyone finished
        if host is not None and any(p.poll() is not None and guest_code(consoles[g]) != 0 for g, p in enumerate(guests)):
            break  # a guest failed: the host side would only wait for it until the deadline
        time.sleep(0.05)
    # Past the deadline with something still running; a run stopped early by a failure is no timeout.
    timed_out = time.monotonic() >= deadline and (any(p.poll() is None for p in guests) or
                                                  (host is not None and host.poll() is None))
    host_code = host.poll() if host is not None else 0
    cleanup()
    codes = [guest_code(console) for console in consoles]
    ok = not timed_out and all(c == 0 for c in codes) and host_code == 0
    for g, console in enumerate(consoles):
        text = open(console, errors="replace").read() if os.path.exists(console) else "(no console output)"
        if not ok or args.verbose:
            print(f"----- guest {g} console (exit {codes[g]}) -----\n{text}", flush=True)
        else:
            for line in text.splitlines():
                if line.startswith(REPORT_MARK):
                    print(f"guest {g}: {line[len(REPORT_MARK):]}", flush=True)
    for g, p in enumerate(guests):  # cleanup() has emptied _procs
        err = p.stderr.read().decode(errors="replace") if p.stderr else ""
        if err.strip() and not ok:
            print(f"----- guest {g} qemu stderr -----\n{err}", flush=True)
    if host is not None and (not ok or args.verbose):
        host_log.seek(0)
        print(f"----- host command (exit {host_code}) -----\n{host_log.read().decode(errors='replace')}", flush=True)
    elapsed = time.monotonic() - start
    if timed_out:
        what = "the guests or the host command" if host is not None else "the guests"
        print(f"rdmad_vm: FAIL: {what} did not finish within {args.timeout} s", flush=True)
    else:
        host_part = f", host command exit {host_code}" if host is not None else ""
        print(f"rdmad_vm: {'PASS' if ok else 'FAIL'}: guest exit codes {codes}{host_part} in {elapsed:.1f} s", flush=True)
    shutil.rmtree(logdir, ignore_errors=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fetch and unpack the guest kernel, build the initramfs")
    p.add_argument("--cache", required=True)
    r = sub.add_parser("run", help="boot guests and run a script in each")
    r.add_argument("--cache", required=True)
    r.add_argument("--guests", type=int, default=1)
    r.add_argument("--rails", type=int, default=2)
    r.add_argument("--mtu", type=int, default=1500, help="the rails' netdev MTU (rxe's active MTU follows it)")
    r.add_argument("--tap", metavar="NETNS", help="add a NIC joined to tap0 in this new network namespace")
    r.add_argument("--host-cmd", metavar="CMD", help="run `bash -c CMD` in NETNS beside the guests; it must exit 0 too")
    r.add_argument("--mem", type=int, default=1536, help="MiB per guest")
    r.add_argument("--timeout", type=float, default=300)
    r.add_argument("--out", help="a directory the guests share read-write (mounted at /mnt; default: a fresh "
                                 "temporary one)")
    r.add_argument("--verbose", action="store_true", help="print the consoles even when the run passes")
    r.add_argument("--sysroot", metavar="DIR",
                   help="boot DIR (a Debian root, shared read-write) with systemd as PID 1 instead of running "
                        "boot.sh in the host's root; a unit in DIR runs the script (tests/vm/systemd_guest_test.sh)")
    r.add_argument("script")
    r.add_argument("script_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    # The guests see this machine's root, not our working directory: every path they get is absolute.
    args.cache = os.path.abspath(args.cache)
    if args.command == "prepare":
        vmlinux, initramfs, root, version = prepare(args.cache)
        print(f"rdmad_vm: kernel {version}: {vmlinux}, {initramfs}")
        return 0
    if args.guests < 1 or args.rails < 1:
        ap.error("--guests and --rails must be at least 1")
    if not 576 <= args.mtu <= 65535:
        ap.error("--mtu must be 576..65535")
    if args.host_cmd and not args.tap:
        ap.error("--host-cmd runs in the --tap namespace: give --tap too")
    return run_guests(args)


if __name__ == "__main__":
    sys.exit(main())
