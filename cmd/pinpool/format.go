package main

// yesNo renders a boolean for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
