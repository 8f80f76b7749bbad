/** The main job end to end on the embedded SQLite store (issue 4, tests 1–5). */
import { mainJobSuite } from "./main-job.suite.ts";

mainJobSuite("sqlite");
