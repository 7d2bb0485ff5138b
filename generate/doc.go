// Package generate is the host side of generating a sequence from a model, one token at a time:
// it validates the options (Options.Check), draws each token from the model's logits (Sampler:
// temperature, top-k, greedy with TopK 1, a PCG generator seeded from Options.Seed, so one seed
// always gives one sequence), and runs the loop (Generate) over a Stepper, the three methods a
// model implements: Context, Reset and Step (feed one token at a position, get the logits of the
// next). Fake is an in-memory Stepper for tests.
//
// The caller owns the model and its device: a Stepper keeps whatever cache it likes between Steps
// of one window. Generate feeds the prompt position by position, then each drawn token; when the
// window is full it resets the Stepper and feeds the last half of the sequence again, so a
// cached Stepper and one that recomputes its whole window give the same tokens. It refuses an
// empty prompt and one longer than the context; cutting a prompt is the caller's choice.
//
// Errors name the option's field and its command-line flag (Tokens, --tokens) and the fix; a
// Stepper's error or panic comes back as an error naming the position. Nothing here panics.
// Options and Generate are safe for concurrent use; a Sampler and a Stepper belong to one
// goroutine at a time.
package generate
