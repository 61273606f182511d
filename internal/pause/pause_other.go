//go:build !linux

package pause

import "time"

func sleep(d time.Duration) { time.Sleep(d) }
