// Package tblog writes a run's record as TensorBoard event files, so `tensorboard --logdir runs`
// shows it: Writer is a logjson.Logger writing <run dir>/tb/events.out.tfevents.<time>.<host>.
// Guide: docs/logging.md.
//
// Metrics become scalars tagged <context>/<name> (train/loss, val/val_accuracy, data/...) at
// their step; an epoch's lines carry the step it ended at. Params, free-form values, tags and
// the final status become text summaries (the Text tab). Each Writer starts a new file; each
// record goes to it in one unbuffered write call, so TensorBoard sees it at once; Finish syncs
// and closes. Messages are encoded with protowire, from the protobuf module the workspace has:
// generated types would need protoc and TensorBoard's .proto files for five small messages.
// We found no maintained Go TFRecord package, so the framing (length, masked CRC-32C) is ours.
//
// Left to the caller: the folder (New, ForRun or SetDir, before the first write), calling
// Finish (the first status wins), and running TensorBoard; WithJSON adds the JSON Lines record.
// Errors: file errors name the file; ErrNoDir (also logjson.ErrNoPath), logjson.ErrFinished and
// logjson.ErrUnknownStatus match with errors.Is. A Writer is safe for concurrent use; its error
// should not stop training.
package tblog
