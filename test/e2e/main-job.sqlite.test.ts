/** The main job end to end on the embedded SQLite store. */
import { mainJobSuite } from "./main-job.suite.ts";

mainJobSuite("sqlite");
