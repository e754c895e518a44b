import {
  formatJson,
  formatText,
  parseDescription,
  parseMeta,
  parseSchema,
  parseSystem,
  parseTemplate,
} from "./doc.ts";
import { checkTable } from "../../tests/table.ts";

Deno.test("system.md / prompt.template.md: accept/reject table (UTF-8 text, no NUL, <= 64 KiB)", () => {
  for (
    const [control, parse] of [["system.md", parseSystem], [
      "prompt.template.md",
      parseTemplate,
    ]] as const
  ) {
    checkTable(parse, formatText, {
      control,
      accept: [
        ["", ""],
        ["You are terse.\n", "You are terse.\n"],
        ["no final newline", "no final newline"],
        ["{{rules}}\n日本語\n", "{{rules}}\n日本語\n"],
        ["x".repeat(65536), "x".repeat(65536)],
      ],
      reject: [
        ["a\0b", "EINVAL", "contains a NUL byte"],
        ["x".repeat(65537), "EMSGSIZE", "65537 bytes is over the 65536 byte limit"],
        ["é".repeat(32769), "EMSGSIZE", "65538 bytes"],
      ],
    });
  }
});

Deno.test("tool description: accept/reject table (non-blank text)", () => {
  checkTable(parseDescription, formatText, {
    control: "description",
    accept: [["Read a file.\n", "Read a file.\n"]],
    reject: [["", "EINVAL", "is empty"], [" \n", "EINVAL", "is empty"], ["a\0", "EINVAL", "NUL"]],
  });
});

Deno.test("meta.json / schema: accept/reject table (one JSON object)", () => {
  for (const [control, parse] of [["meta.json", parseMeta], ["schema", parseSchema]] as const) {
    checkTable(parse, formatJson, {
      control,
      accept: [
        ["{}\n", {}],
        [
          '{"type":"object","required":["path"]}',
          { type: "object", required: ["path"] },
          '{\n  "type": "object",\n  "required": [\n    "path"\n  ]\n}\n',
        ],
        ['  {"a": null}  \n', { a: null }, '{\n  "a": null\n}\n'],
      ],
      reject: [
        ["", "EINVAL", "is not JSON"],
        ["{", "EINVAL", "is not JSON"],
        ["[]\n", "EINVAL", "is an array, not a JSON object"],
        ["null\n", "EINVAL", "is null, not a JSON object"],
        ['"x"\n', "EINVAL", "is a string, not a JSON object"],
        ["1\n", "EINVAL", "is a number, not a JSON object"],
        ["{}\n{}\n", "EINVAL", "is not JSON"],
        ['{"a":"' + "x".repeat(65536) + '"}', "EMSGSIZE", "over the 65536 byte limit"],
      ],
    });
  }
});
