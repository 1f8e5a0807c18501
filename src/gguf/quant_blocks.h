/* Block layouts: filled in by the quant work (see quant.h). */
#ifndef MEMRA_GGUF_QUANT_BLOCKS_H
#define MEMRA_GGUF_QUANT_BLOCKS_H
#endif
