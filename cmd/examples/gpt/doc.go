// Package gpt is nitro's language-model example (CLI name "gpt"): a decoder-only transformer in
// GPT-2's shape trained on bytes of text, the next byte at every position.
//
// The model, for tokens [B, T] (int32 bytes, T <= Context):
//
//	x = wte[tokens] + wpe[0:T]                    token embedding [256, Dim], learned positions [Context, Dim]
//	x = dropout(x)
//	Layers times (pre-LayerNorm blocks):
//	    x += dropout(proj(causal_attention(ln_1(x))))   Heads heads of Dim/Heads, softmax(q·kᵀ/sqrt(Dim/Heads)), future masked
//	    x += dropout(fc_2(gelu(fc_1(ln_2(x)))))         an MLP of width 4*Dim, GELU's tanh form (GPT-2's)
//	logits = ln_f(x) · wteᵀ                          the output projection is the token embedding, transposed (tied)
//
// Every linear layer has a bias; weights are drawn from N(0, 0.02²), the two residual projections
// of each block from N(0, (0.02/sqrt(2*Layers))²) as GPT-2 scales them, biases start at 0 and the
// LayerNorm gains at 1 (epsilon 1e-5). Dropout (the Dropout field, 0 by default) is applied in
// training only, at the four places marked above and on the attention weights.
// The vocabulary is the 256 byte values: no tokenizer, any UTF-8 text works. ParamCount is the
// parameter count in closed form: 12·Layers·Dim² + 13·Layers·Dim + (256 + Context + 2)·Dim, which
// for the gpt2 preset is 86,039,040 (GPT-2 small's 124M less its 50,257-token embedding, plus
// a 256-byte one).
//
// Data: prefetch/text's Split over Corpus (empty: the Go source tree, text.DefaultCorpus, its .go
// files), windows of Context+1 bytes at positions drawn from Seed; "tokens" are a window's first
// Context bytes and "targets" its last Context. Val is held out by file (by row of a Parquet
// column, as the tail of a single file); there is no test split. BatchesPerEpoch and ValBatches
// bound an epoch and a validation in global batches; BatchSize is each process's, so `mpirun
// -np 2` at BatchSize B trains what one process at 2B on two devices does. A checkpoint's data
// position then counts this world's batches, so a resume under another process count is refused.
//
// Training is by steps, as language models are trained: MaxSteps optimizer steps (the learning
// rate's schedule spans them), a validation on the same ValBatches every ValEvery steps, and a
// checkpoint at each (core's step periods; an epoch is only how many windows are drawn before
// they are drawn afresh, and a kill loses at most ValEvery steps).
//
// Loss: the mean cross-entropy (nats) over every position of every window; every "train" line
// also carries it in bits per byte (bpb). Metrics (val): loss, accuracy (next-byte arg-max) and
// bpb, bits per byte (loss / ln 2), each summed over positions and divided by their count. A
// uniform guess over bytes scores ln 256 = 5.55 nats, 8 bits per byte. Throughput declares a
// window's cost, so each validation's line also shows tokens (bytes) per second and the model
// FLOPs utilization against the device's measured matrix-product rate.
//
// Optimizer: Adam (betas 0.9, Beta2) with decoupled weight decay Lambda applied to the weight
// matrices only (not to biases, LayerNorm gains and offsets, or the two embeddings: NoDecay),
// the learning rate warmed up linearly over WarmupFrac of the run then decayed along a cosine to
// a tenth, and the gradients clipped to global norm GradientClipNorm (AdamW: decay kept out of
// the moment estimates, so it shrinks weights at the same rate whatever their gradients).
//
// Presets: tiny (2 layers, 2 heads, width 32, context 32: seconds on a CPU, the test's), small
// (4 layers, 4 heads, width 128, context 64: minutes on two CPU cores) and gpt2 (12 layers,
// 12 heads, width 768, context 1024: GPT-2 small's shape). The defaults are small's.
//
// The experiment keeps the sources BuildData opened (memory-mapped files); Close releases them.
//
// Measured on 2 shared CPU cores (XLA plugin): tiny trains its 60 steps in well under a second
// once compiled, from a val loss of 5.51 to 3.50 (5.05 bits per byte); small runs about 13
// steps a second, its 2000 steps in 2.5 minutes, to a val loss of 1.93 (2.79 bits per byte);
// gpt2 at BatchSize 1 runs a step in about 5 seconds, with a peak RSS of 7.6 GB.
package gpt
