import { createRequire as __batonCreateRequire } from "node:module";
import { fileURLToPath as __batonFileURLToPath } from "node:url";
import { dirname as __batonDirname } from "node:path";
const require = __batonCreateRequire(import.meta.url);
const __filename = __batonFileURLToPath(import.meta.url);
const __dirname = __batonDirname(__filename);
import{o as a,p as b,q as c,r as d,s as e,t as f,u as g,v as h,w as i,x as j}from"./chunk-MVT5W3RH.js";import"./chunk-Y6RC5EL4.js";import"./chunk-TWHDBROZ.js";export{f as SUMMARY_MAX_BYTES,g as SUMMARY_MAX_ROWS,d as adviceOf,c as callbackText,a as logTail,h as mdText,b as redact,e as sendCallback,i as summaryMarkdown,j as writeSummary};
