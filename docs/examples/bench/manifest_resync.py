#!/usr/bin/env python3
"""A re-sync with a manifest against the first one and cp (docs/benchmarks.md).

usage (as root): manifest_resync.py SPARSESYNC DIR [dense|sparse ...]

DIR holds WORKLOAD.old (the target's last version; setup in docs/benchmarks.md).
Per round, interleaved: "steady" re-syncs an older copy to .old untimed (which
records the manifest) and times the re-sync to .src; "first" times the re-sync
of a plain copy of .old (no manifest); "nomanifest2" is "steady" with
--manifest=false; "cp" times cp and sync -f. Caches are dropped before each
timed run; every result is checked with cmp.
"""
import subprocess,time,os,random,statistics,json,sys
SS, M = sys.argv[1], sys.argv[2]
def sh(*a): subprocess.run(a,check=True,stdout=subprocess.DEVNULL)
def drop():
    sh('sync'); open('/proc/sys/vm/drop_caches','w').write('3\n')
def change(path, seed):
    r=random.Random(seed)
    # 1% of the data's 4 KiB blocks
    out=subprocess.run([SS,'extents','--json',path],capture_output=True,text=True,check=True).stdout
    ext=json.loads(out)['extents']
    blocks=[]
    for e in ext:
        for o in range(e['offset'],e['offset']+e['length'],4096): blocks.append(o)
    pick=r.sample(blocks,len(blocks)//100)
    with open(path,'r+b') as f:
        for o in pick: f.seek(o); f.write(os.urandom(4096))
def timed(cmd):
    t=time.perf_counter(); out=subprocess.run(cmd,check=True,capture_output=True,text=True).stdout; return time.perf_counter()-t,out
ws=sys.argv[3:] or ['dense','sparse']
for w in ws:
    old=f'{M}/{w}.old'; src=f'{M}/{w}.src'; prior=f'{M}/{w}.prior'; dst=f'{M}/{w}.dst'
    for p,s in ((src,1),(prior,2)):
        if not os.path.exists(p):
            sh('cp','--sparse=always',old,p); change(p,s)
    res={'steady':[], 'first':[], 'cp':[], 'nomanifest2':[]}
    mb=[]
    for rnd in range(5):
        order=list(res); order=order[rnd%4:]+order[:rnd%4]
        for k in order:
            for f in (dst, dst+'.sparsesync'):
                if os.path.exists(f): os.unlink(f)
            if k=='steady' or k=='nomanifest2':
                sh('cp','--sparse=always',prior,dst)
                extra=[] if k=='steady' else ['--manifest=false']
                sh(SS,'local',*extra,old,dst)
                drop()
                d,out=timed([SS,'local','--json',*extra,src,dst])
                if k=='steady': mb.append(json.loads(out)['manifest_bytes'])
            elif k=='first':
                sh('cp','--sparse=always',old,dst); drop()
                d,out=timed([SS,'local','--json',src,dst])
            else:
                sh('cp','--sparse=always',old,dst); drop()
                t=time.perf_counter(); sh('cp',src,dst); sh('sync','-f',dst); d=time.perf_counter()-t
            res[k].append(d)
            sh('cmp',src,dst)
    med={k:statistics.median(v) for k,v in res.items()}
    print(w, {k:round(v,3) for k,v in med.items()}, 'steady/cp', round(med['steady']/med['cp'],2), 'first/cp', round(med['first']/med['cp'],2), 'steady/first', round(med['steady']/med['first'],2), 'manifest_bytes', mb[:2], flush=True)
    print(w, 'raw', {k:[round(x,3) for x in v] for k,v in res.items()}, flush=True)
