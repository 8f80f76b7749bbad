import { createRequire as __batonCreateRequire } from "node:module";
import { fileURLToPath as __batonFileURLToPath } from "node:url";
import { dirname as __batonDirname } from "node:path";
const require = __batonCreateRequire(import.meta.url);
const __filename = __batonFileURLToPath(import.meta.url);
const __dirname = __batonDirname(__filename);
import{k as n,l,m as r,n as a}from"./chunk-26XPF2OV.js";function u(t,e,o){let s=a(t),i=o&&Array.isArray(s.checks)?s.checks:[];l(t,[...i,e.check]),n(t,e.status,"fail"),r(t,e.check.message??e.status)}function d(t,e){let o={name:"tool",exit_code:t.exitCode,signal:t.signal?.replace(/^SIG/,"")??null,duration_ms:t.finishedAt-t.startedAt};if(t.spawnError||t.exitCode===127||t.exitCode===126)return{status:"failed",check:{...o,status:"failed",class:"tool_not_found",message:`[action] the tool could not be executed (${t.spawnError??`exit ${t.exitCode}`})`}};if(t.timedOut)return{status:"timeout",check:{...o,status:"timeout",class:"tool_timeout",message:"[action] the tool exceeded its overall deadline and was stopped"}};let s=a(e);return t.exitCode===0&&t.signal===null||s.status!=="not_run"&&s.overall==="fail"?null:{status:"failed",check:{...o,status:"failed",class:"tool_crashed",message:`[action] the tool ended with ${t.signal?`signal ${t.signal}`:`exit ${t.exitCode}`} without reporting a failure; treated as failed`}}}export{u as a,d as b};
