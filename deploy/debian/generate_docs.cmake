# Run at build time: the packaged default configuration and the man pages rdmad(8), rdmad-supervise(8), rdmactl(1)
# and rdmad.toml(5) come from the binaries themselves (-DRDMAD=<binary> -DRDMACTL=<binary>
# -DOUT_DIR=<dir> -DCONFIG_FILE=<path> -DSOCKET_PATH=<path> -DSOURCE_DIR=<dir>); librdmad(3) is
# written by hand (deploy/debian/librdmad.3). Every page is installed gzipped (gzip -9n: no name,
# no time stamp, so the same input gives the same bytes).
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

# roff: a leading '.' or "'" starts a request and '\' escapes; neutralise both in a text.
function(roff_escape var)
  set(t "${${var}}")
  string(REPLACE "\\" "\\e" t "${t}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" t "${t}")
  string(REPLACE "-" "\\-" t "${t}")
  set(${var} "${t}" PARENT_SCOPE)
endfunction()
roff_escape(help)
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
.TP
.I ${ADMIN_SOCKET_PATH}
The admin socket, root and the daemon's user only (created by rdmad\\-admin.socket under systemd).
.SH ENVIRONMENT
.TP
.B CREDENTIALS_DIRECTORY
Set by systemd for a unit with \\fBLoadCredential=\\fR. A key or certificate setting of the form
\\fBcredential:\\fR\\fINAME\\fR is the file \\fI\$CREDENTIALS_DIRECTORY/NAME\\fR: a root-only key can
reach \\fBUser=rdmad\\fR that way (operations.md, section Keys and certificates).
.SH SIGNALS
SIGHUP reloads the configuration file (a file with any error is rejected as a whole);
SIGTERM and SIGINT stop the daemon.
.SH SEE ALSO
.BR systemctl (1),
/usr/share/doc/rdmad/operations.md,
/usr/share/doc/rdmad/configuration.md
")

execute_process(COMMAND ${RDMACTL} --help OUTPUT_VARIABLE ctl_help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${RDMACTL} --help failed: ${rc}")
endif()
roff_escape(ctl_help)
file(WRITE ${OUT_DIR}/rdmactl.1 ".TH RDMACTL 1 \"\" \"${version}\" \"User Commands\"
.SH NAME
rdmactl \\- operator CLI for the rdmad RDMA node daemon
.SH SYNOPSIS
.B rdmactl
[\\fB\\-\\-socket\\fR \\fIPATH\\fR] [\\fB\\-\\-admin\\-socket\\fR \\fIPATH\\fR] [\\fB\\-\\-json\\fR] \\fICOMMAND\\fR
.SH DESCRIPTION
The text below is rdmactl's own \\fB\\-\\-help\\fR output.
.PP
.nf
${ctl_help}.fi
.SH ENVIRONMENT
.TP
.B RDMAD_SOCKET
The daemon's client socket when \\fB\\-\\-socket\\fR is not given (default ${SOCKET_PATH}).
.TP
.B RDMAD_ADMIN_SOCKET
The daemon's admin socket when \\fB\\-\\-admin\\-socket\\fR is not given (default ${ADMIN_SOCKET_PATH}).
.SH SEE ALSO
.BR rdmad (8),
.BR rdmad.toml (5),
/usr/share/doc/rdmad/operations.md
")

execute_process(COMMAND ${SUPERVISE} --help OUTPUT_VARIABLE sup_help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SUPERVISE} --help failed: ${rc}")
endif()
roff_escape(sup_help)
file(WRITE ${OUT_DIR}/rdmad-supervise.8 ".TH RDMAD-SUPERVISE 8 \"\" \"${version}\" \"System Administration\"
.SH NAME
rdmad-supervise \\- runs rdmad with a file-descriptor store where systemd does not
.SH SYNOPSIS
.B rdmad-supervise
[\\fIOPTIONS\\fR] \\fB\\-\\-\\fR \\fICOMMAND\\fR [\\fIARGS\\fR...]
.SH DESCRIPTION
The text below is rdmad-supervise's own \\fB\\-\\-help\\fR output. Under systemd it is not needed:
rdmad.service keeps the descriptors itself (FileDescriptorStoreMax=).
.PP
.nf
${sup_help}.fi
.SH SEE ALSO
.BR rdmad (8),
/usr/share/doc/rdmad/operations.md
")

set(config_text "")
file(READ ${OUT_DIR}/rdmad.toml config_text)
roff_escape(config_text)
file(WRITE ${OUT_DIR}/rdmad.toml.5 ".TH RDMAD.TOML 5 \"\" \"${version}\" \"File Formats\"
.SH NAME
rdmad.toml \\- configuration file of the rdmad RDMA node daemon
.SH DESCRIPTION
.I ${CONFIG_FILE}
is TOML. Unknown keys, wrong types and out-of-range values are errors that name the file, the
line and the key; \\fBrdmad \\-\\-check\\-config\\fR \\fIFILE\\fR checks a file as the daemon
would read it, and SIGHUP (\\fBsystemctl reload rdmad\\fR) applies a file that has no error.
The text below is the default configuration (\\fBrdmad \\-\\-print\\-default\\-config\\fR): every key,
its default and its documentation.
.PP
.nf
${config_text}.fi
.SH SEE ALSO
.BR rdmad (8),
/usr/share/doc/rdmad/configuration.md
")

foreach(page rdmad.8 rdmactl.1 rdmad.toml.5 rdmad-supervise.8)
  execute_process(COMMAND gzip -9nf ${OUT_DIR}/${page} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${page} failed: ${rc}")
  endif()
endforeach()
configure_file(${SOURCE_DIR}/deploy/debian/librdmad.3 ${OUT_DIR}/librdmad.3 COPYONLY)
execute_process(COMMAND gzip -9nf ${OUT_DIR}/librdmad.3)

# The Debian changelog of this native package (lintian: usr/share/doc/<package>/changelog.gz).
if(NOT PACKAGE_CONTACT MATCHES "^[^<>]+ <[^<>@]+@[^<>]+>$")
  message(FATAL_ERROR "PACKAGE_CONTACT '${PACKAGE_CONTACT}' is not 'name <address>'")
endif()
string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)  # SOURCE_DATE_EPOCH when set
file(WRITE ${OUT_DIR}/changelog "rdmad (${PACKAGE_VERSION}) unstable; urgency=medium

  * Release ${PACKAGE_VERSION}. What changed is in CHANGELOG.md of the source.

 -- ${PACKAGE_CONTACT}  ${date}
")
execute_process(COMMAND gzip -9nf ${OUT_DIR}/changelog)
