// Package archcheck holds the tests that keep the house in order; it has no code of its own.
// layers_test.go holds every import between Switchyard's packages to the floors of DESIGN.md
// section 2 (no import back up, no circle between floors, folders named as their packages);
// handlers_test.go holds the handler types of commands to at most 25 methods each.
package archcheck
