package core

// trainState is the run's progress: the optimizer step, the epoch and the data position. With
// the engine's tensors (parameters, optimizer and layer state, read and installed as named
// tensors) it is exactly what a checkpoint saves and restores.
type trainState struct {
	step  int          // optimizer steps taken
	epoch int          // epochs completed
	data  dataPosition // where the next train batch comes from
}

// dataPosition is the next train batch: the epoch being trained (1-based) and the batch index in
// it. Sources are index addressable and plan each epoch from (seed, epoch) alone, so this is all a
// mid-epoch resume needs to replay the same data order.
type dataPosition struct {
	epoch, batch int
}
