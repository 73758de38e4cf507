// Package errtext renders an error's text without the package names its
// sentinels carry ("tcpsync: no such remote file" becomes "no such remote
// file"), for the CLI's one line and for the message a tcpsync server
// sends its client. Only a sentinel's own text loses its name: a path such
// as /mnt/d1/disks in the message is never touched.
package errtext
