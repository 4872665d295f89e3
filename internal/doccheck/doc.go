// Package doccheck holds tests that keep documents in docs/ in step with the code they
// describe; it has no code of its own. catalogue_test.go checks the event catalogue of
// docs/architecture.md against the event types the domain packages register.
package doccheck
