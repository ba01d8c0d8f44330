// Class names taken from files: weights metadata, checkpoints, an Ultralytics .pt's names, exported
// packages, dataset YAMLs, classes.txt and COCO categories. Each reader checks every name as it reads
// it (check_class_name): a NUL byte is refused, as no path, C string or terminal keeps it (a crop
// folder named with one hung save_crop). Names are otherwise kept as written (spaces, UTF-8, even
// "/" and ".."), so labels, plots and JSON outputs keep the reference's names; where a name becomes
// a path, class_folder_name makes it one safe folder name, and where one is printed,
// util::printable (util/printable.h) escapes its control characters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lucid::util {

// Refuses a name holding a NUL byte: "<place>: class name "a\x00b" holds a NUL byte ...", place
// naming the file and the entry or line.
void check_class_name(const std::string& name, const std::string& place);

// check_class_name on each name, place + " entry <k>" for the k-th.
void check_class_names(const std::vector<std::string>& names, const std::string& place);

// The folder of class cls's files inside an output folder (crops/<folder>/): its name with each "/",
// "\", control character (C0, DEL) and "%" written %XX, so that the folder is one entry of crops/
// and no two names share it; "", "." and ".." become class<cls>; a name longer than 200 bytes is cut
// there (at a character's start) and gets "~<cls>" added, under the file system's 255.
std::string class_folder_name(const std::string& name, int64_t cls);

}  // namespace lucid::util
