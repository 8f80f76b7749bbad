/**
 * `npm run schema`: writes the recipe JSON Schema to engine/schema/recipe.schema.json.
 * A unit test fails when the committed file differs from what this would write.
 */
import { writeFileSync } from "node:fs";
import { RECIPE_SCHEMA_PATH, recipeJsonSchemaText } from "../engine/src/recipes/json-schema.ts";

writeFileSync(RECIPE_SCHEMA_PATH, recipeJsonSchemaText());
console.log(`[schema] wrote ${RECIPE_SCHEMA_PATH}`);

import { RECORD_SCHEMA_PATH, recordJsonSchemaText } from "../engine/src/record/schema.ts";

writeFileSync(RECORD_SCHEMA_PATH, recordJsonSchemaText());
console.log(`[schema] wrote ${RECORD_SCHEMA_PATH}`);
