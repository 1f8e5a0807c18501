#!/bin/bash
# Unpacks what a device call carried xz-compressed (the device tool's 64 MiB carry limit): every *.xz in the
# folders given, in place, then marks .bin's files executable.
#   bash bench/unpack.sh .bin .fix
for d in "$@"; do
    for z in "$d"/*.xz; do
        [ -f "$z" ] || continue
        python3 -c 'import lzma, sys; open(sys.argv[1][:-3], "wb").write(lzma.open(sys.argv[1]).read())' "$z" &&
            rm -f "$z"
    done
    [ "$d" = .bin ] && chmod +x .bin/* 2>/dev/null
done
exit 0
