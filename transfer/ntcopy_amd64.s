#include "textflag.h"

// func ntCopy64(dst, src *byte, n uintptr)
//
// Copies n bytes (a multiple of 64) from src to dst (16-byte aligned) with
// non-temporal stores, then fences them.
TEXT ·ntCopy64(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $6, CX
	JZ   done

loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ  $64, SI
	ADDQ  $64, DI
	DECQ  CX
	JNZ   loop

done:
	SFENCE
	RET
