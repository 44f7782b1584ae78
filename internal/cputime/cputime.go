// Package cputime reads the CPU time this process has used: the load
// tools' own CPU per call, and the server's in Sys/Stats.
package cputime
