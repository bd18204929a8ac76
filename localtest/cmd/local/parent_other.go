//go:build !linux

package main

// stopWithParent does nothing: only Linux has a parent-death signal.
func stopWithParent() {}
