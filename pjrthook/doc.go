// Package pjrthook is nitro's one PJRT interposer: per real plugin, a copy of its PJRT_Api
// function table in which PJRT_Client_Compile calls Go first, registered with gopjrt through
// pjrt.RegisterPreloadedPlugin (Register returns the name to hand GoMLX). Every other entry is
// the real plugin's own, so clients, buffers and executables are the plugin's objects.
//
// Pieces sit on the one Compile hook, each small: the capture piece (Arm, Recorded, Disarm)
// keeps the programs exportbundle writes into a bundle; the disk cache piece (SetDisk, with the
// plain-Go policy in package diskcache) answers a compile from disk or writes it there. Stats
// counts compiles and loads from disk for the run's "compile cache:" line. The client-create
// piece (SetDistributed) wraps PJRT_Client_Create when the process is one rank of several: it adds
// node_id and num_nodes and the three key-value callbacks, served by a Store (StoreOf over a
// client of package kvstore's coordinator, which rank 0 serves), so XLA's GPU plugin spans them.
//
// The package is this workspace's only cgo on the training path: the backend trains through it
// when the disk cache is on (the default). The C half declares only the ABI slots it calls (from
// pjrt_c_api.h, major version 0; the layout test checks each against the header), keeps no Go
// pointers, and calls the plugin only through its own table. A plugin's compile error goes back
// to the caller unchanged; a failure of a piece never does. At most four plugins per process.
package pjrthook
