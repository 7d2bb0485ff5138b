// Package pjrthook is nitro's one PJRT interposer: per real plugin, a copy of its PJRT_Api table
// in which PJRT_Client_Compile calls Go first, registered through pjrt.RegisterPreloadedPlugin
// (Register returns the name to hand GoMLX); every other entry is the plugin's own.
//
// Small pieces sit on the hooks. Aliasing (DeclareAliases) marks the @main arguments a builder
// declared replaced by an output (tf.aliasing_output), so donated buffers update in place.
// Capture (Arm, Recorded, Disarm) keeps the programs exportbundle writes. The disk cache
// (SetDisk; policy in package diskcache) answers a compile from disk, or compiles and returns at
// once while the entry is written in the background; LoadedExecutable_Destroy of an executable
// whose write waits hands the destroy to that write, _Delete and Client_Destroy finish the write
// before the plugin frees what it reads, and Flush finishes all. Sharing (ShareCompiles) answers a repeated program with its first
// executable, freed by its last holder. Client create (SetDistributed) adds node_id, num_nodes
// and the key-value callbacks (a Store) for one rank of several; widening turns the program named
// XProcessModule into one replica per process (LastWidening says what it did). Stats counts.
//
// The only cgo of ours that core's training path links (hostalloc, cgo too, is linked only by a
// program that imports it, as the nitro CLI does). The C half declares only the ABI slots it
// calls (checked against pjrt_c_api.h by the layout test), keeps no Go pointers, and calls a
// plugin only through its table. A plugin's compile error reaches the caller unchanged; a piece's
// failure never does. At most four plugin files a process: each is bound once, and every later
// client of the file, by any path to it, shares that slot (Register).
package pjrthook
