//go:build linux

package main

import "syscall"

// setParentDeathSignal makes the kernel send SIGKILL to the child when the
// thread that started it ends (see startTied).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
