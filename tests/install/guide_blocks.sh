# tests/install/guide_blocks.sh - sourced by the tests that walk the
# operator's guide (guide_test.sh, systemd_test.sh):
#
#   guide_blocks GUIDE DIR
#
# writes DIR/NAME.LANG for each `<!-- test: NAME -->` line of GUIDE
# followed by a fenced block (its text, as written), and prints "bad LINE"
# for a marker without one, "dup NAME" for a name used twice, "untested
# LINE" for an unmarked sh block that does not say "(not run by a test".
guide_blocks() {
  awk -v dir="$2" '
    /^<!-- test: [a-z0-9-]+ -->$/ { name = $3; marker = NR; next }
    /^```/ && !inblock {
      inblock = 1
      lang = substr($0, 4)
      if (name != "" && marker == NR - 1) {
        file = dir "/" name "." lang
        if (name in seen) print "dup " name
        seen[name] = 1
        printf "" >file
      } else {
        file = ""
        if (lang == "sh") { start = NR; text = "" }
      }
      name = ""
      next
    }
    /^```/ && inblock {
      inblock = 0
      if (file != "") close(file)
      else if (lang == "sh" && text !~ /\(not run by a test/) print "untested " start
      next
    }
    inblock && file != "" { print >>file; next }
    inblock { text = text $0 "\n"; next }
    name != "" && marker == NR - 1 { print "bad " marker; name = "" }
  ' "$1"
}
