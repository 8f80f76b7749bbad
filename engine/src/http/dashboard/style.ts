/** The dashboard's whole stylesheet, inlined into every page (no asset pipeline). */
export const CSS = `
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--run:#0969da;--off:#6e7781}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0}
header.top{display:flex;flex-wrap:wrap;gap:.4rem 1.5rem;align-items:center;padding:.6rem 1.2rem;border-bottom:1px solid var(--line);background:var(--soft)}
header.top a{color:var(--fg);text-decoration:none;font-weight:600}
header.top nav{display:flex;flex-wrap:wrap;gap:.3rem 1rem}
header.top .who{margin-left:auto;color:var(--muted);font-size:.9em}
main{max-width:1400px;margin:0 auto;padding:1rem 1.2rem 3rem}
h1{font-size:1.45rem;margin:.4rem 0 .8rem}h2{font-size:1.15rem;margin:1.6rem 0 .5rem}
a{color:#0550ae}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{border-bottom:1px solid var(--line);padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
caption{text-align:left;color:var(--muted);padding:.2rem 0}
td.mono{white-space:nowrap}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
pre{background:var(--soft);border:1px solid var(--line);padding:.6rem;overflow:auto;max-height:32rem;white-space:pre-wrap;overflow-wrap:anywhere}
.st{display:inline-block;padding:0 .45rem;border-radius:1rem;font-weight:600;font-size:.85em;border:1px solid currentColor;white-space:nowrap}
.st-succeeded,.st-pass,.st-passed,.st-ok{color:var(--ok)}
.st-failed,.st-fail,.st-dispatch_failed,.st-needs_operator,.st-aborted{color:var(--bad)}
.st-unknown,.st-paused,.st-compensating,.st-rolled_back,.st-fenced,.st-not_run{color:var(--warn)}
.st-running,.st-dispatching,.st-dispatched,.st-applying,.st-pending{color:var(--run)}
.st-planned{color:var(--off)}
tr.bwd td{background:#fff8f0}
tr.hwm td{background:#fff1c2;border-top:3px solid var(--warn);border-bottom:3px solid var(--warn);font-weight:600}
tr.refused td{background:#ffebe9}
tr.housekeeping td{color:#57606a}
tr.failing td:first-child{border-left:4px solid var(--bad)}
.muted{color:var(--muted)}.small{font-size:.85em}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;overflow-wrap:anywhere}
.bar{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center;margin:.6rem 0}
.btn,button{font:inherit;padding:.3rem .8rem;border:1px solid var(--line);border-radius:.35rem;background:var(--soft);color:var(--fg);cursor:pointer;text-decoration:none}
.btn.danger,button.danger{border-color:var(--bad);color:var(--bad)}
.notice{border:1px solid var(--line);border-left:5px solid var(--run);padding:.6rem .9rem;margin:.8rem 0;background:var(--soft)}
.notice.bad{border-left-color:var(--bad)}.notice.ok{border-left-color:var(--ok)}
.panel{border:1px solid var(--line);border-radius:.4rem;padding:.8rem 1rem;margin:1rem 0}
input,select{font:inherit;padding:.2rem .35rem}
label{margin-right:.3rem}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(22rem,100%),1fr));gap:1rem}
nav.pages{margin:.6rem 0;display:flex;gap:1rem}
:focus-visible{outline:3px solid #0969da;outline-offset:2px}
h1 .sub{display:block;font-size:.85rem;font-weight:400;color:var(--muted);margin-top:.15rem}
.headline{font-size:1.1rem;font-weight:600;margin:.2rem 0 .3rem;overflow-wrap:anywhere}
.why{margin:.2rem 0 .5rem;border-left:5px solid var(--bad);padding:.3rem .7rem;background:#fff5f5;overflow-wrap:anywhere}
.tag{display:inline-block;margin-left:.5rem;padding:0 .4rem;border-radius:.3rem;font-size:.8em;font-weight:600;border:1px solid currentColor}
.tag.op{color:#8250df}.tag.bad{color:var(--bad)}.tag.cand{color:var(--run);margin-left:0}.tag.base{color:var(--muted);margin-left:0}
ul.offers{list-style:none;padding:0;margin:.4rem 0;display:grid;gap:.35rem}
ul.offers li{display:flex;flex-wrap:wrap;gap:.2rem .6rem;align-items:baseline}
.panel.bad{border-left:5px solid var(--bad);padding:.4rem .8rem;margin:.5rem 0}
.panel h2{margin:.1rem 0 .3rem;font-size:1.05rem}
.panel p{margin:.2rem 0}
pre.excerpt{margin:0;max-height:6rem}
.scroll{overflow-x:auto;max-width:100%}
.wrap{overflow-wrap:anywhere}
table.compact td,table.compact th{padding:.15rem .4rem}
.cols.tight{gap:0 1.2rem}.cols.tight h2{margin:.5rem 0 .2rem;font-size:1rem}.cols.tight p{margin:.2rem 0}
tr.wave th{background:#eef3f8;font-weight:600}
tr.op td{background:#f5f0ff}
nav.filters{display:flex;flex-wrap:wrap;gap:.3rem 1rem;margin:.3rem 0}
details>summary{cursor:pointer;font-weight:600}
td.differs{background:#fff5f5}
.block{display:block}
.nowrap{white-space:nowrap}
table.fleet td{overflow-wrap:anywhere}
@media (max-width:640px){
 main{padding:.6rem .6rem 2rem}
 .wide{display:none}
 .cols{grid-template-columns:1fr}
 table{font-size:.85em}
 th,td{padding:.25rem .3rem}
 td.mono{white-space:normal}
 dl.kv{grid-template-columns:1fr}
 header.top .who{margin-left:0}
 header.top>a:first-child{display:none}
 header.top nav{gap:.2rem .55rem;font-size:.8em}
 .panel{padding:.5rem .6rem}
 table.fleet thead{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
 table.fleet tr{display:block;border-bottom:2px solid var(--line);padding:.3rem 0}
 table.fleet th,table.fleet td{display:block;border:0;padding:.15rem .3rem}
 table.fleet td[data-label]::before{content:attr(data-label);display:block;font-weight:600;color:var(--muted);font-size:.85em}
}
`;
