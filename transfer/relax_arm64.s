#include "textflag.h"

// func cpuRelax()
//
// Four YIELD instructions: a spinning core's hint that it waits.
TEXT ·cpuRelax(SB), NOSPLIT, $0-0
	YIELD
	YIELD
	YIELD
	YIELD
	RET
