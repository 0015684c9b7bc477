# Run at build time: the packaged default configuration and the rdmad(8) man page come from the
# daemon binary itself (-DRDMAD=<binary> -DOUT_DIR=<dir> -DCONFIG_FILE=<path> -DSOCKET_PATH=<path>).
execute_process(COMMAND ${RDMAD} --print-default-config OUTPUT_FILE ${OUT_DIR}/rdmad.toml
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${RDMAD} --print-default-config failed: ${rc}")
endif()
execute_process(COMMAND ${RDMAD} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${RDMAD} --help failed: ${rc}")
endif()
execute_process(COMMAND ${RDMAD} --version OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE)

# roff: a leading '.' or "'" starts a request and '\' escapes; neutralise both in the help text.
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
string(REPLACE "-" "\\-" help "${help}")
file(WRITE ${OUT_DIR}/rdmad.8 ".TH RDMAD 8 \"\" \"${version}\" \"System Administration\"
.SH NAME
rdmad \\- per-node RDMA daemon for GPU servers
.SH SYNOPSIS
.B rdmad
[\\fB\\-\\-config\\fR \\fIFILE\\fR]
.SH DESCRIPTION
The text below is the daemon's own \\fB\\-\\-help\\fR output.
.PP
.nf
${help}.fi
.SH FILES
.TP
.I ${CONFIG_FILE}
The configuration (TOML); \\fBrdmad \\-\\-print\\-default\\-config\\fR prints every key with its documentation.
.TP
.I ${SOCKET_PATH}
The client socket (created by rdmad.socket under systemd).
.SH SIGNALS
SIGHUP reloads the configuration file (a file with any error is rejected as a whole);
SIGTERM and SIGINT stop the daemon.
.SH SEE ALSO
.BR systemctl (1),
/usr/share/doc/rdmad/operations.md,
/usr/share/doc/rdmad/configuration.md
")
