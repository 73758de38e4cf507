# verify.py A B: A and B have the same size, the same SEEK_DATA/SEEK_HOLE map
# and the same bytes in every data extent (no code of sparsesync's).
import os,sys,hashlib
def walk(p):
    fd=os.open(p,os.O_RDONLY); size=os.fstat(fd).st_size; off=0; ext=[]
    while off<size:
        try: d=os.lseek(fd,off,os.SEEK_DATA)
        except OSError: break
        h=os.lseek(fd,d,os.SEEK_HOLE); ext.append((d,h-d)); off=h
    return fd,size,ext
a=walk(sys.argv[1]); b=walk(sys.argv[2])
assert a[1]==b[1], ("size",a[1],b[1])
assert a[2]==b[2], ("extents differ", len(a[2]), len(b[2]))
for off,n in a[2]:
    assert os.pread(a[0],n,off)==os.pread(b[0],n,off), ("data",off)
print("identical: size %d, %d extents, %d data bytes"%(a[1],len(a[2]),sum(n for _,n in a[2])))
