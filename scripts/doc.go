// Package scripts holds the tests of the shell scripts in this directory (run.sh, postgres.sh,
// test.sh); it has no code of its own.
package scripts
