//go:build !linux

package main

import "syscall"

// setParentDeathSignal does nothing where there is no Pdeathsig: the
// reaper alone ends the command's group when coordctl dies (see startTied).
func setParentDeathSignal(*syscall.SysProcAttr) {}
