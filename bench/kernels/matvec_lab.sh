#!/bin/bash
# Decode matvec lab (bench/kernels/matvec_lab.cu), built and run by lab.sh.
#   bash bench/kernels/matvec_lab.sh [in n_out]
exec bash "$(dirname "$0")/lab.sh" matvec_lab "$@"
