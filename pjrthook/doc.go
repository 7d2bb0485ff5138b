// Package pjrthook is nitro's one PJRT interposer: per real plugin, a copy of its PJRT_Api
// function table in which PJRT_Client_Compile calls Go first, registered with gopjrt through
// pjrt.RegisterPreloadedPlugin (Register returns the name to hand GoMLX). The other entries are
// the real plugin's own, so clients, buffers and executables are the plugin's objects.
//
// Pieces sit on the hooks, each small: the aliasing piece (DeclareAliases) marks the @main
// arguments a program's builder declared as replaced by an output (tf.aliasing_output), so XLA
// updates donated buffers in place; the capture piece (Arm, Recorded, Disarm) keeps the
// programs exportbundle writes into a bundle; the disk cache piece (SetDisk, with the plain-Go
// policy in package diskcache) answers a compile from disk, or compiles and returns at once while
// the entry is serialized and written in the background. The release hooks (LoadedExecutable
// Destroy and Delete, Client_Destroy) finish such a write before the plugin frees what it reads;
// Flush finishes them all before a process ends. The sharing piece (ShareCompiles) answers a
// repeated program with its first executable (freed by its last holder); Stats counts each. The
// client-create piece (SetDistributed) adds node_id, num_nodes and the key-value callbacks (a
// Store, StoreOf over package kvstore's client) when the process is one rank of several; the
// cross-process piece widens the one program named XProcessModule (compiled as one device) to one
// replica per process of the client, and says what it did in LastWidening.
//
// This is the workspace's only cgo on the training path. The C half declares only the ABI slots
// it calls (pjrt_c_api.h, major version 0; the layout test checks each against the header), keeps
// no Go pointers, and calls the plugin only through its own table. A plugin's compile error goes
// back to the caller unchanged; a failure of a piece never does. At most four plugins a process.
package pjrthook
