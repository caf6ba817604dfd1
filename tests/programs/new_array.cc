// operator new[] and new: the site must be the caller's line, not libstdc++'s operator new.
#include <cstdio>

struct Widget {
  ~Widget() {}  // a destructor makes new[] store the element count: 8 more bytes
  char payload[24];
};

int* make_ints() {
  return new int[1000];  // @new_ints 4000 bytes
}

Widget* make_widgets() {
  return new Widget[10];  // @new_widgets 10 * 24 + 8 = 248 bytes
}

Widget* make_widget() {
  return new Widget;  // @new_widget 24 bytes
}

int main() {
  int* ints = make_ints();
  Widget* widgets = make_widgets();
  Widget* widget = make_widget();
  delete widget;  // freed: only the arrays stay
  std::printf("%d %d\n", ints[0] = 1, widgets[0].payload[0] = 2);
  return 0;
}
