import { createRequire as __batonCreateRequire } from "node:module";
import { fileURLToPath as __batonFileURLToPath } from "node:url";
import { dirname as __batonDirname } from "node:path";
const require = __batonCreateRequire(import.meta.url);
const __filename = __batonFileURLToPath(import.meta.url);
const __dirname = __batonDirname(__filename);
import{f as a,g as b,h as c,i as d,j as e,k as f,l as g,m as h,n as i,o as j,p as k}from"./chunk-MVTZ2XQA.js";import"./chunk-Y6RC5EL4.js";import"./chunk-26XPF2OV.js";import"./chunk-TWHDBROZ.js";export{d as CLIPPED_CHECK_CHARS,g as SUMMARY_MAX_BYTES,h as SUMMARY_MAX_ROWS,e as adviceOf,c as callbackText,a as logTail,i as mdText,b as redact,f as sendCallback,j as summaryMarkdown,k as writeSummary};
