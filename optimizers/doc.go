// Package optimizers is nitro's optimizer: RAdam by default (Level 0), a rule per parameter group
// (Level 1) or a whole chain of transforms (Level 2), resolved on the host into a Plan that also
// gives the binding report's rows. Guide: docs/optimizers.md.
//
// It builds the optimizer program: per parameter group, a Chain of Transforms
// (optax's model: an init/update pair with typed state; Init on the host, Update in the graph)
// after one global-norm clip over all groups (ClipByGlobalNorm, baked; 0 emits nothing).
// Layout is the group's flat view: Init builds the state on it, Decay's mask and anchor are
// defined on it, and the engine keeps parameters, gradients and state on the device in buffers
// cut from it (the small arrays together, each large one alone), applying each chain with
// Program.ApplyArrays, the group's scalar math built once via Shared. The engine's
// BenchmarkOptimizerLayout found why at 6, 60 and 600 arrays: a program with one buffer per array
// grows in nodes and inputs with the array count, and at 600 arrays its step costs what merely
// copying as many buffers costs; packing the arrays inside the program compiles 4-19x slower;
// only a flat buffer at the program's boundary removes the buffer count (its step about 20x
// faster at 600 arrays).
//
// Rules RAdam (the Level 0 default), Adam, SGD and Momentum follow optax's conventions exactly
// (formulas on each type); Decay is decoupled, last, with a zero, w0 or explicit anchor and a
// per-leaf no-decay mask.
// A Chain is itself a Transform, so chains nest (optax's chain of chains). Decay stays last
// without the chain knowing its type: Decay implements Terminal (it must end its chain, because
// anywhere before the base rule its term would feed the moments: coupled L2), a Chain answers
// Terminal with its last member's answer, and NewChain refuses a Terminal member anywhere but
// last. So [radam [decay]] is accepted and [[radam decay] sgd] is refused, naming the reorder.
// Schedulable hyperparameters are scalar device inputs (Hyper), so changing them never
// recompiles; nonschedulable ones are declared once per rule, baked, and named by Describe, which
// is what the compile cache key takes. The step is 1-based; every step-dependent scalar (bias
// corrections, RAdam's rho_t, r_t and switch) is computed in float64 in the graph and cast once to
// the parameters' dtype, so float32 training matches the float64 formulas (the backend must run
// float64 scalar ops: XLA on CPU and GPU and the pure-Go backend do).
//
// Resolve turns what an experiment declares (PlanSpec: the run-wide rate and lambda, the groups'
// layouts, the optional per-group accessors, Level 1 rule or Level 2 factory, the schedules) into
// a Plan, in host code: each group's final chain, the base value of every field it reads, the
// bound schedules, per-step values (Plan.Hyper) and the binding report's rows (GroupBindings,
// DeviceBinding). Left to the caller (core): uploading the state GroupPlan.InitState builds and
// each step's values, compiling and running the programs, and checkpointing state leaves
// (ConstantLeaves says which to rebuild with Init instead).
// Errors: exported host functions return errors naming the field, the value and the fix;
// graph-building functions (Apply, Update, ClipByGlobalNorm) panic, as GoMLX does.
// Chains, Programs and Layouts are immutable and safe for concurrent use. Only state leaves and scalar
// hyperparameters ever cross a program boundary: a chain's rules are Go values that stay on the host.
package optimizers
