import { createRequire as __batonCreateRequire } from "node:module";
import { fileURLToPath as __batonFileURLToPath } from "node:url";
import { dirname as __batonDirname } from "node:path";
const require = __batonCreateRequire(import.meta.url);
const __filename = __batonFileURLToPath(import.meta.url);
const __dirname = __batonDirname(__filename);
import{f as a,g as b,h as c,i as d,j as e,k as f,l as g,m as h,n as i,o as j}from"./chunk-364ZQ2VI.js";import"./chunk-Y6RC5EL4.js";import"./chunk-H5HRX3D6.js";import"./chunk-TWHDBROZ.js";export{f as SUMMARY_MAX_BYTES,g as SUMMARY_MAX_ROWS,d as adviceOf,c as callbackText,a as logTail,h as mdText,b as redact,e as sendCallback,i as summaryMarkdown,j as writeSummary};
