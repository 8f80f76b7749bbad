import { createRequire as __batonCreateRequire } from "node:module";
import { fileURLToPath as __batonFileURLToPath } from "node:url";
import { dirname as __batonDirname } from "node:path";
const require = __batonCreateRequire(import.meta.url);
const __filename = __batonFileURLToPath(import.meta.url);
const __dirname = __batonDirname(__filename);
import{a,b}from"./chunk-GNNC5ELM.js";import"./chunk-26XPF2OV.js";import"./chunk-TWHDBROZ.js";export{b as judgeToolExit,a as recordVerdict};
