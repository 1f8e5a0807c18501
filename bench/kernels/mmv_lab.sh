#!/bin/bash
# Tensor-core decode matvec lab (bench/kernels/mmv_lab.cu), built and run by lab.sh.
#   bash bench/kernels/mmv_lab.sh [in n_out]
exec bash "$(dirname "$0")/lab.sh" mmv_lab "$@"
