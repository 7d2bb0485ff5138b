// Package logjson will own the logger contract (a small interface at the consumer) and the
// JSON Lines logger, plus an adapter onto go.uber.org/zap and an in-memory fake for tests.
//
// Status: contract reserved, not implemented yet. Each record will be one self-contained JSON
// object per line, flushed on Finish, so a crashed run leaves every complete line readable.
package logjson
