// Package rebuild makes a replica directory an identical, verified copy of
// another, offline (Rebuild) or while the volume keeps taking writes
// (AddReplica, through replica.Volume.AddReplica), the way Longhorn's sync
// agent does, but crash-safe:
//
//	lock target; read the source's volume.meta
//	replica.Stage.Demote: the target's older copy into its staging directory
//	Stage.Clean: staged files the source does not have
//	copy each image and .meta, oldest first, into the staging directory:
//	    localsync.Copy (reflink, copy_file_range, read/write; only what
//	    differs), verified (FIEMAP or bytes), fdatasynced
//	on a local failure: remove what the local attempt created, warn,
//	    tcpsync.Pull every file instead (hash compare, verified, read back)
//	Stage.Finish: the source's counters, volume.meta
//	Stage.Publish: rename to the top level, the head's .meta last (commit)
//	on failure: Stage.Purge
//
// The on-disk protocol (what each instant looks like to Longhorn and to
// replica.Open) is package replica's; this package moves the bytes. It is
// the only part of the replica packages that imports localsync and
// tcpsync.
package rebuild
