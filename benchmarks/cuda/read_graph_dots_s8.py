import re, sys, glob
def top_nodes(path):
    txt = open(path).read()
    # top-level cluster is the first; nodes of it: "graph_X_node_N"[... label="N\nNAME\n"]
    m = re.search(r'subgraph cluster_(\d+)', txt)
    top = m.group(1)
    nodes = re.findall(r'"graph_%s_node_(\d+)"\[[^\]]*label="\d+\n([^\n]*)\n' % top, txt)
    out = []
    for i, name in nodes:
        short = name
        mm = re.match(r'_ZN3mlx4core2cu(\d+)(\w+)', name)
        if mm:
            n = int(mm.group(1)); short = mm.group(2)[:n]
        elif name.startswith('graph_'):
            short = 'CHILD'
        out.append(short)
    return out
for f in sys.argv[1:]:
    ns = top_nodes(f)
    print(f, len(ns), ' '.join(ns))
