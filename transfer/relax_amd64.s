#include "textflag.h"

// func cpuRelax()
//
// Four PAUSE instructions: a spinning core's hint that it waits, which
// frees its pipeline for the other thread of the core and saves power.
TEXT ·cpuRelax(SB), NOSPLIT, $0-0
	PAUSE
	PAUSE
	PAUSE
	PAUSE
	RET
