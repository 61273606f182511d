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

// func flushLines(p, n uintptr)
//
// Evicts the n bytes at p (whole 64-byte lines, p 64-byte aligned) from
// every CPU cache with CLFLUSHOPT, then fences.
TEXT ·flushLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $6, CX
	JZ   fdone

floop:
	CLFLUSHOPT (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ  floop

fdone:
	SFENCE
	RET

// func cpuid7EBX() uint32
TEXT ·cpuid7EBX(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL BX, ret+0(FP)
	RET

// func demoteLines(p, n uintptr)
//
// Moves the n bytes at p (whole 64-byte lines, p 64-byte aligned) from the core's own caches to the
// last-level cache with CLDEMOTE, a hint that CPUs without it execute as a no-op.
TEXT ·demoteLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $6, CX
	JZ   ddone

dloop:
	CLDEMOTE (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ  dloop

ddone:
	RET
