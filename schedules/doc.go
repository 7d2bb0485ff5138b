// Package schedules: see the issue tracker; being built.
package schedules
