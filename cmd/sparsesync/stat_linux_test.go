package main

import "syscall"

type syscallStat = syscall.Stat_t
