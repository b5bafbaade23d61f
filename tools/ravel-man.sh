#!/bin/sh
# Writes the ravel(1) man page to stdout, made from the command's own help
# (`ravel --help`, `ravel help COMMAND`) and the README's table of
# environment variables, so the page cannot drift from either.
#   sh tools/ravel-man.sh build/ravel README.md >ravel.1
set -e
ravel=$1
readme=$2

# roff-escapes stdin: backslashes, hyphens (minus signs in options), and
# lines that start with a control character
roff() {
    sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

version=$("$ravel" --version | sed 's/^ravel //')
cat <<END
.TH RAVEL 1 "" "ravel $version" "User Commands"
.SH NAME
ravel \\- a compiler and runtime for dynamic neural networks
.SH SYNOPSIS
.B ravel
.I COMMAND
.RI [ ARGS ]
.br
.B ravel help
.RI [ COMMAND ]
.br
.B ravel \\-\\-version
.SH DESCRIPTION
.B ravel
checks, interprets, compiles (JIT, through the system C compiler) and
builds ahead of time programs written in the ravel language
(.rv files: sizes with ranges, uninterpreted functions, ragged tensors and
schedules). Exit status: 0 on success, 1 when the input is wrong (a
diagnostic was printed), 2 on a usage error.
.SH COMMANDS
END
for c in $("$ravel" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
    echo ".SS $c"
    echo ".nf"
    "$ravel" help "$c" | roff
    echo ".fi"
done
echo ".SH ENVIRONMENT"
# shellcheck disable=SC2016 # the backquotes are markdown, not commands
sed -n '/^## Environment/,/^## /p' "$readme" | sed -n 's/^| `\([A-Z_]*\)` | \(.*\) | \(.*\) |$/\1\t\2\t\3/p' |
    tr -d '`' | while IFS='	' read -r name meaning default; do
    echo ".TP"
    echo ".B $name"
    printf '%s (default: %s)\n' "$meaning" "$default" | roff
done
cat <<END
.SH FILES
.TP
.I ~/.cache/ravel
the JIT's cache of compiled kernels (see RAVEL_CACHE_DIR); it may be removed at any time
.SH SEE ALSO
.BR cc (1),
.BR pkg\\-config (1);
the language and its schedules: docs/language.md and docs/schedules.md of
ravel's source.
END
