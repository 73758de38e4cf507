# mk.py PATH N: N data extents of 4 KiB of random bytes, one every 1900 KiB,
# then a size of 2 TiB and an fsync (the file of issue 26 with N=1100000).
import os,sys
p=sys.argv[1]; n=int(sys.argv[2])
fd=os.open(p,os.O_CREAT|os.O_WRONLY|os.O_TRUNC,0o644)
blk=os.urandom(4096*256)
for i in range(n):
    j=i%256
    b=bytearray(blk[j*4096:(j+1)*4096]); b[0:8]=i.to_bytes(8,'little')
    os.pwrite(fd,bytes(b),i*1900*1024)
os.ftruncate(fd,2*1024**4)
os.fsync(fd); os.close(fd)
