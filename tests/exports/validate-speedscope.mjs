// Validates a speedscope file against the file-format schema that speedscope's npm package
// ships (dist/release/file-format-schema.json, JSON Schema draft-07), with ajv.
// Usage: node validate-speedscope.mjs FILE.speedscope.json
// Prints "valid" and exits 0, or prints ajv's errors and exits 1.
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import Ajv from 'ajv';

const require = createRequire(import.meta.url);
const schemaPath = require.resolve('speedscope/package.json').replace(
    /package\.json$/, 'dist/release/file-format-schema.json');
const schema = JSON.parse(readFileSync(schemaPath, 'utf8'));
const file = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const validate = new Ajv({allErrors: true, strict: false}).compile(schema);
if (validate(file)) {
  console.log('valid');
} else {
  console.log(JSON.stringify(validate.errors, null, 2));
  process.exit(1);
}
