//go:build linux && amd64

#include "textflag.h"

// fastTrampoline is called by runtime.cgocall on the system stack with the C
// calling convention and DI pointing to a fastArgs (fastcall_linux_amd64.go):
//
//	0  setCurrent  cuCtxSetCurrent, or 0 to skip it
//	8  ctx         the CUcontext to make current
//	16 fn          the driver function
//	24 a0 ... 64 a5  its arguments
//	72 r           the CUresult
//
// It makes ctx current and, if that succeeded, calls fn, all on one OS thread
// and within one cgocall: the goroutine cannot move to another thread in
// between, so no LockOSThread is needed.
GLOBL ·fastTrampolineABI0(SB), NOPTR|RODATA, $8
DATA ·fastTrampolineABI0(SB)/8, $fastTrampoline(SB)

TEXT fastTrampoline(SB), NOSPLIT, $16
	MOVQ DI, 8(SP)     // keep the args pointer
	MOVQ 0(DI), R11    // setCurrent
	TESTQ R11, R11
	JZ   call
	MOVQ 8(DI), DI     // ctx
	XORL AX, AX
	CALL R11
	MOVQ 8(SP), R11
	MOVQ AX, 72(R11)
	TESTL AX, AX
	JNZ  done

call:
	MOVQ 8(SP), R11
	MOVQ 24(R11), DI
	MOVQ 32(R11), SI
	MOVQ 40(R11), DX
	MOVQ 48(R11), CX
	MOVQ 56(R11), R8
	MOVQ 64(R11), R9
	MOVQ 16(R11), R10
	XORL AX, AX        // no vector registers used (varargs convention)
	CALL R10
	MOVQ 8(SP), R11
	MOVQ AX, 72(R11)

done:
	RET
